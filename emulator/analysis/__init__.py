"""What the emulator derives from a scenario without running it: the numbers pass
(``numbers``, with its suggested findings in ``findings``) and the placement puzzle
(``placement``)."""
