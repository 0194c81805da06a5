"""Text for people: names shortened by meaning, numbers in cells, tables fitted to a width, timelines as text."""
