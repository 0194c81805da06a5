"""What every view stands on: the scope, row preparation, intervals, kernel types, the memo, knobs."""
