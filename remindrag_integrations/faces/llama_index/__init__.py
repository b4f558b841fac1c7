"""The LlamaIndex face: result conversion and the memory event handler."""
