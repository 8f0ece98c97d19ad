"""The trainer's AdamW: torch's fused kernel on the CPU too, the same update as the reference loop up to rounding."""

import torch

from ragen2.model.optim import ADAM_BETAS, adamw


def test_adamw_is_fused_over_the_trainable_parameters_and_matches_the_plain_loop():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(16, 1))
    model[0].bias.requires_grad_(False)
    twin = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(16, 1))
    twin.load_state_dict(model.state_dict())
    twin[0].bias.requires_grad_(False)
    fused = adamw(model, lr=1e-2, weight_decay=0.1)
    assert fused.defaults["fused"] is True and fused.defaults["betas"] == ADAM_BETAS
    assert sum(len(g["params"]) for g in fused.param_groups) == 3  # the frozen bias is left out
    plain = torch.optim.AdamW([p for p in twin.parameters() if p.requires_grad], lr=1e-2, betas=ADAM_BETAS,
                              weight_decay=0.1, foreach=False)
    x = torch.randn(32, 8)
    for _ in range(5):
        for net, opt in ((model, fused), (twin, plain)):
            opt.zero_grad()
            net(x).pow(2).mean().backward()
            opt.step()
    for a, b in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
