"""The benchmark suite: an experiment is a declaration (:mod:`bench.suite.experiment`), run by one
runner (:mod:`bench.suite.runner`), reported and plotted by one module (:mod:`bench.suite.report`).

    python -m bench.suite nexmark --events 1000000 --repeats 3
"""
