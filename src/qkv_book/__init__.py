"""qkv_book: the website's helpers around the reference (course machinery, not the math).

- :mod:`qkv_book.display`: matrices and equations as LaTeX, typeset by MathJax or Jupyter.
- :mod:`qkv_book.plots`: attention maps and the book's other figures (matplotlib).
- :mod:`qkv_book.widgets`: the interactive explorers (ipywidgets).

Each module is imported explicitly (``from qkv_book.display import show_matrix``); the
reference itself is :mod:`qkv`.
"""
