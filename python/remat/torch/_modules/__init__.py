"""The module path: the blocks the model calls in sequence are its stages
(discover.py), run by the model's own forward with hooks around each block
(program.py), measured block by block and with the plain step around them
(measure.py)."""
