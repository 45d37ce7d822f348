"""The emulator's tests, laid out like ``emulator/`` (``scenario/``, ``sim/``, ``analysis/``,
``cli/``), with the golden results and the whole-package checks at the top.

The modules beside this file are shared by the tests below it (the independent
reference models, ``token_reference``, ``disagg_reference``, ``prefix_reference``,
``autoscale_reference``, ``tier_reference``, ``simpy_reference``, and the scenarios they run, ``scenarios``,
``token_scenarios``, ``disagg_scenarios``): pytest puts this folder on ``sys.path``
because this file is here, so ``from token_reference import ...`` works from any
subfolder.
"""
