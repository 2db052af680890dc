"""Analysis and reporting code: statistics, figures and the paper's published numbers (report.py uses them)."""
