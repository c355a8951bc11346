"""Correctness beyond equality (issue 50 item 3): a check judged per prompt in both arms on the same prompts, each
arm's pass rate and McNemar on the pairs (`paired`); a stream against the same request answered unary (`stream`);
outputs against their items' response_format (`structured`). Pure functions of output text and per-prompt results;
they know nothing of runs on disk, servers or the report."""
