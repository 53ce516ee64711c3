"""Model: from a breakdown's verify step to ranked what-ifs, in four layers, left to right.

``inputs`` (what is asked and measured) < ``cycle`` (the cycle and its time) < ``fixes`` (one
module per family of fixes) < ``decision`` (candidates, plan, plain decoding, verdict, what-if).
A layer imports only itself and the layers to its left; no module import circle anywhere
(tests/test_architecture.py).
"""
