"""simrec's own studies (installed as ``simrec_studies``): thin compositions of the library, one
module per study, each defining ``STUDY`` (a `simrec.runner.Study`), and the benchmarks, each
defining ``main(argv) -> int``. They are registered through the ``simrec.studies`` and
``simrec.benchmarks`` entry points in ``pyproject.toml``; the library never imports them.
"""
