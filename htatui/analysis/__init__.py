"""Pure analysis functions over loaded traces: polars in, polars out, no Textual, no printing."""
