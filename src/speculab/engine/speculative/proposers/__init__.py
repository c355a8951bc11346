"""The proposers: what drafts tokens for the target to verify, behind one interface (`proposer`): n-gram prompt lookup
(`ngram`), a draft model (`draft_model`) and an EAGLE head over the target's hidden states (`eagle`, `eagle_head`),
the last two sharing one drafting loop (`drafting`). They see token ids, logits and hidden states, never text."""
