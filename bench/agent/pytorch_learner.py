#!/usr/bin/env python3
"""The DQN update of convoy's DqnLearner, written in PyTorch, for convoy_bench_learner to time beside the C++ one.

    pytorch_learner.py --model=compact --batch_size=32 --threads=1 --seconds=5 --parameters=190181
    pytorch_learner.py ... --device=cuda --amp=on

Builds the same Q-network as common/model/model_registry.cc (compact or cookbook, optionally dueling), runs the same
update on a fixed random uint8 minibatch (Double DQN target from a target network, Huber loss, mean, backward,
gradient-norm clipping at 10, Adam at 1e-3) as fast as it can for --seconds after --warmup_steps, and prints
`RESULT steps_per_s=...`. --parameters is the C++ model's parameter count: the script refuses to time a
network that differs from it. --device=cuda keeps the networks and the minibatch on the first GPU, as the C++
learner does; --amp=on (CUDA only) runs the forward passes under autocast and scales the loss with a
GradScaler, as the C++ learner's dynamic loss scale does (unscaled before clipping, a step skipped on
overflow).
"""

import argparse
import contextlib
import sys
import time

import torch
from torch import nn

SHAPES = {"compact": (3, 14, 63), "cookbook": (3, 59, 255)}


class QNetwork(nn.Module):
    def __init__(self, architecture: str, dueling: bool, num_actions: int):
        super().__init__()
        c = SHAPES[architecture][0]
        if architecture == "compact":
            self.features = nn.Sequential(
                nn.Conv2d(c, 16, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(16, 32, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten())
            self.hidden = nn.Sequential(nn.Linear(32 * 3 * 15, 128), nn.ReLU())
        else:  # cookbook
            self.features = nn.Sequential(
                nn.Conv2d(c, 16, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(16, 32, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(32, 32, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten())
            self.hidden = nn.Sequential(nn.Dropout(0.2), nn.Linear(32 * 7 * 31, 128), nn.Dropout(0.2))
        self.dueling = dueling
        if dueling:
            self.value = nn.Linear(128, 1)
            self.advantage = nn.Linear(128, num_actions)
        else:
            self.head = nn.Linear(128, num_actions)

    def forward(self, x):
        h = self.hidden(self.features(x))
        if not self.dueling:
            return self.head(h)
        a = self.advantage(h)
        return self.value(h) + a - a.mean(dim=1, keepdim=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="compact")
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seconds", type=float, default=5)
    p.add_argument("--parameters", type=int, required=True)
    p.add_argument("--num_actions", type=int, default=5)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--amp", choices=("off", "on"), default="off")
    p.add_argument("--warmup_steps", type=int, default=20)
    args = p.parse_args()
    amp = args.amp == "on"
    if amp and args.device != "cuda":
        sys.exit("pytorch_learner.py: --amp=on needs --device=cuda")
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit(f"pytorch_learner.py: --device=cuda, but torch {torch.__version__} sees no CUDA device")
    device = torch.device("cuda", 0) if args.device == "cuda" else torch.device("cpu")

    architecture = args.model.removesuffix("_dueling")
    if architecture not in SHAPES:
        sys.exit(f"pytorch_learner.py: --model={args.model}: only compact and cookbook (optionally _dueling)")
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    online = QNetwork(architecture, args.model.endswith("_dueling"), args.num_actions)
    target = QNetwork(architecture, args.model.endswith("_dueling"), args.num_actions)
    target.load_state_dict(online.state_dict())
    count = sum(p.numel() for p in online.parameters())
    if count != args.parameters:
        sys.exit(f"pytorch_learner.py: the PyTorch {args.model} has {count} parameters, convoy's {args.parameters}")
    online.to(device)
    target.to(device)
    optimizer = torch.optim.Adam(online.parameters(), lr=1e-3)
    # torch.amp.GradScaler is 2.3's name; 1.x has only torch.cuda.amp's (deprecated from 2.4).
    scaler = None
    if amp:
        scaler = torch.amp.GradScaler("cuda") if hasattr(torch.amp, "GradScaler") else torch.cuda.amp.GradScaler()

    n, shape = args.batch_size, SHAPES[architecture]
    gen = torch.Generator().manual_seed(7)
    observations = torch.randint(0, 256, (n, *shape), dtype=torch.uint8, generator=gen).to(device)
    next_observations = torch.randint(0, 256, (n, *shape), dtype=torch.uint8, generator=gen).to(device)
    actions = torch.randint(0, args.num_actions, (n,), generator=gen).to(device)
    returns = torch.rand(n, generator=gen).to(device)
    discounts = torch.full((n,), 0.99).to(device)
    weights = torch.ones(n).to(device)

    def autocast():
        return torch.autocast("cuda", dtype=torch.float16) if amp else contextlib.nullcontext()

    def step():
        with torch.no_grad(), autocast():
            following = next_observations.float().div_(255.0)
            online.eval()
            next_target_q = target(following).float()
            next_actions = online(following).argmax(1, keepdim=True)
            target_values = returns + discounts * next_target_q.gather(1, next_actions).squeeze(1)
        online.train()
        with autocast():
            q = online(observations.float().div_(255.0)).float()
        q_taken = q.gather(1, actions.unsqueeze(1)).squeeze(1)
        loss = (weights * nn.functional.huber_loss(q_taken, target_values, reduction="none", delta=1.0)).mean()
        (scaler.scale(loss) if scaler else loss).backward()
        # The C++ learner reads these back every step (loss, mean Q, TD errors for prioritized replay).
        loss.item()
        q_taken.detach().mean().item()
        (target_values - q_taken.detach()).abs().tolist()
        if scaler:
            scaler.unscale_(optimizer)
        nn.utils.clip_grad_norm_(online.parameters(), 10.0)
        if scaler:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        optimizer.zero_grad()

    def synchronize():
        if device.type == "cuda":
            torch.cuda.synchronize()

    for _ in range(args.warmup_steps):
        step()
    synchronize()
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < args.seconds:
        step()
        steps += 1
    synchronize()
    print(f"RESULT steps_per_s={steps / (time.perf_counter() - start):.3f}")
    print(f"RESULT torch_version={torch.__version__}")


if __name__ == "__main__":
    main()
