"""One screen per view, plus the loading, help, rank picker and export dialogs."""
