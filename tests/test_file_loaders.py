"""``remindrag index folder`` reads .pdf / .docx / .csv / .html through LlamaIndex's file readers
(the ``files`` extra) and names every file it cannot read."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cli import run

from remindrag_integrations.app.documents import read_files
from remindrag_integrations.app.specs import CLIError


def _pdf(path: Path, text: str) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=12)
    pdf.multi_cell(0, 8, text)
    pdf.output(str(path))


def _docx(path: Path, text: str) -> None:
    import docx

    d = docx.Document()
    d.add_paragraph(text)
    d.save(str(path))


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    docs = tmp_path / "mixed"
    docs.mkdir()
    _pdf(docs / "refunds.pdf", "Refunds are paid within 14 days of the return.")
    _docx(docs / "shipping.docx", "Parcels ship from the Leeds warehouse on Mondays.")
    (docs / "prices.csv").write_text("item,price\nkettle,30\ntoaster,45\n", encoding="utf-8")
    (docs / "support.html").write_text(
        "<html><head><title>t</title><script>var x = 1;</script></head>"
        "<body><h1>Support</h1><p>Call the helpdesk on weekdays.</p></body></html>",
        encoding="utf-8",
    )
    (docs / "notes.txt").write_text("Plain notes.", encoding="utf-8")
    (docs / "diagram.vsdx").write_bytes(b"PK\x03\x04 not a document we read")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 truncated")
    (docs / ".hidden.txt").write_text("never indexed", encoding="utf-8")
    return docs


def test_each_kind_is_read_by_its_library_reader(folder: Path) -> None:
    found = read_files([str(folder)])
    top = folder.resolve().parent  # ids are resolved paths (issue 33): named here below it
    texts = {Path(d.id).relative_to(top).as_posix(): d.text for d in found.documents}
    assert "Refunds are paid within 14 days" in texts["mixed/refunds.pdf"]
    assert "Leeds warehouse on Mondays" in texts["mixed/shipping.docx"]
    assert "kettle, 30" in texts["mixed/prices.csv"]
    assert "Call the helpdesk on weekdays." in texts["mixed/support.html"]
    assert "var x" not in texts["mixed/support.html"]  # the head's script is not text
    assert texts["mixed/notes.txt"] == "Plain notes."
    assert all(d.metadata["source"] == d.id for d in found.documents)
    assert set(texts) == {
        "mixed/refunds.pdf",
        "mixed/shipping.docx",
        "mixed/prices.csv",
        "mixed/support.html",
        "mixed/notes.txt",
    }


def test_a_file_it_cannot_read_is_named_with_the_reason(folder: Path) -> None:
    skipped = read_files([str(folder)]).skipped
    assert set(skipped) == {"mixed/diagram.vsdx", "mixed/broken.pdf"}
    assert "cannot read .vsdx" in skipped["mixed/diagram.vsdx"]
    assert skipped["mixed/broken.pdf"]  # the reader's error, named
    with pytest.raises(CLIError, match="diagram.vsdx: cannot read .vsdx"):
        read_files([str(folder / "diagram.vsdx")])


def test_index_command_reports_skipped_files(folder: Path, tmp_path: Path) -> None:
    out = run("index", str(folder), "--store", str(tmp_path / "store"), cwd=tmp_path).stdout
    assert "cannot read 2 file(s), skipped:" in out
    assert "mixed/diagram.vsdx: cannot read .vsdx" in out
    assert "mixed/broken.pdf:" in out
    assert "to index: 5 documents" in out
