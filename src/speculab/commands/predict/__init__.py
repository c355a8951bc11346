"""`speculab predict`: a few short probes (acceptance on the user's prompts at low load, the engine's step cost at a
few loads), then the predicted speedup at every load and K, the crossover and the best K per load band
(`harness.search.predict`), written to prediction.json.

The probes are an ordinary A/B run of a smaller experiment derived from the user's (`probes`), run by `speculab
run`'s machinery into OUT/probes, so they are paired, resumable and reported like any run; the one command this
package may import besides the stages is `run` (as `init` does). It never renders."""
