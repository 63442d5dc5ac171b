"""One module per report section; section_list.py lists them in report order."""
