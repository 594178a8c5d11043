"""What several studies share: configuration blocks, platforms and data sets, one module per
concept. A study imports from here and from ``simrec``, never from another study."""
