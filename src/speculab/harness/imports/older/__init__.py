"""Older layouts of the files harness.imports reads: each turns a record of an earlier release into the names its
reader knows (pure; nothing filled in that the file does not hold), and names the release its layout is."""
