"""SQLite support shared by the SQL env and its grader: fixture databases built from
packaged data, statement analysis, and a locked-down executor for untrusted SQL."""
