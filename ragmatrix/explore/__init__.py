"""Looking inside the stored results, item by item: the explorer page (`ragmatrix view`), one
item in the terminal (`ragmatrix show`), and the data out (`ragmatrix export`, `load_results`).

- `items`: a stored row beside its family and case, and what it shows when opened;
- `select`: pytest-style `-k` expressions over the stored items;
- `terminal`: an item's detail as plain text, control characters removed;
- `compare`: what changed per item between two result sets, regressions first;
- `page`: the explorer, one self-contained HTML page;
- `export`: flat rows for CSV, Parquet and data frames, and TREC run and qrels files.

Like the report, it reads the families through the descriptors it is given and names none.
"""
