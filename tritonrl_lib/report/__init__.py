"""The results report of a run: every figure (`charts`), the words, the HTML page, and `build`, which
assembles them from whatever the run wrote."""
