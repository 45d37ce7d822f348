"""Text handling with no Django in it: anchors of findings in a doc's text, the diff of
two texts, and Markdown rendered safe. Pure functions of strings."""
