"""The benchmarks: the harness (:mod:`benchmarks.harness`, ``python -m benchmarks.harness``)
and the scripts beside it (``python benchmarks/<name>.py``), with their results in
``benchmarks/results/`` and ``benchmarks/RESULTS.md``. Not part of the installed package."""
