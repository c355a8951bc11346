import torch

from speculab.engine.sampling import processed_probs


def _p(logits, t=1.0, p=1.0, k=0):
    n = logits.shape[0]
    return processed_probs(logits, torch.full((n,), t), torch.full((n,), p), torch.full((n,), k, dtype=torch.long))


def test_greedy_is_one_hot_at_argmax():
    probs = _p(torch.tensor([[0.1, 2.0, 0.3]]), t=0.0)
    assert probs.tolist() == [[0.0, 1.0, 0.0]]


def test_temperature_scales_logits():
    logits = torch.tensor([[0.0, 1.0]])
    assert torch.allclose(_p(logits, t=0.5), torch.softmax(logits / 0.5, -1))


def test_top_k_keeps_k_most_likely():
    probs = _p(torch.tensor([[1.0, 3.0, 2.0, 0.0]]), k=2)
    assert probs[0, 0] == 0 and probs[0, 3] == 0
    assert torch.allclose(probs[0, 1:3], torch.softmax(torch.tensor([3.0, 2.0]), -1))


def test_top_p_keeps_smallest_prefix_reaching_p():
    # probabilities 0.5, 0.3, 0.2: top_p=0.7 keeps the first two (0.5 < 0.7, 0.8 >= 0.7)
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2]]))
    probs = _p(logits, p=0.7)
    assert torch.allclose(probs, torch.tensor([[0.625, 0.375, 0.0]]))


def test_rows_are_processed_independently():
    logits = torch.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
    probs = processed_probs(logits, torch.tensor([0.0, 1.0]), torch.tensor([1.0, 1.0]), torch.tensor([0, 1]))
    assert probs.tolist() == [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
