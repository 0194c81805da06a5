"""Work over a whole job, above the analysis: opening one (traces and datasets), ingesting it into
a dataset, and the per-rank summaries an ingest stores."""
