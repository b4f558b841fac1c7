"""The LangChain face: result conversion and the memory callback."""
