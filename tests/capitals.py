"""Three capitals on their rivers: the small corpus the memory tests write to (the support is
read from the texts, so nothing hinges on a near-tie of scores)."""

TEXTS = {
    "paris.txt": "Paris is the capital of France. The Seine flows through Paris past the Louvre.",
    "warsaw.txt": "Warsaw is the capital of Poland. The Vistula flows through Warsaw to the "
    "Baltic Sea.",
    "rome.txt": "Rome is the capital of Italy. The Tiber flows through Rome near the Vatican.",
}
QUESTION = "Which river flows through Warsaw?"
