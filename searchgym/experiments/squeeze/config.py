"""The squeeze experiment's configuration: :class:`SqueezeConfig` (every knob, the ``--quick`` preset) and the
arm definitions (:data:`ARM_LABELS`, :meth:`SqueezeConfig.arm_args`). No torch import."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from searchgym.errors import ConfigError
from searchgym.train.pretrain import PretrainArgs
from searchgym.train.rl import RLArgs
from searchgym.train.sft import SFTArgs
from searchgym.train.tiny_lm import TinyLMConfig

# shift_renamed / shift_homonym exist in worlds of generator version >= 3 (the default world_version); a stage
# evaluates only the splits its world has.
SHIFT_SPLITS = ("shift_phrasing", "shift_family", "shift_type", "shift_strategy", "shift_renamed", "shift_homonym")
HELDOUT_SPLITS = ("test", *SHIFT_SPLITS)  # evaluated at one equal number of questions each
TINY_PROMPT = "Question: {question}\n"
PRESETS = ("quick", "default", "long", "learns")
LONG_RL: dict[str, Any] = {"total_steps": 40, "learning_rate": 5e-4}  # twice the default dose (docs/squeeze.md,
#                                       "The RL dose": KL to the start 0.34 at step 40 in the sweep)
LEARNS_RL: dict[str, Any] = {"total_steps": 100, "learning_rate": 2e-4}  # the dose that raises train success over
#                                       continued SFT (docs/squeeze.md "A dose that learns": +0.039 [+0.005, +0.073]
#                                       over 10 seeds on world 0, +0.082 on world 1)
_PRESET_RL = {"long": LONG_RL, "learns": LEARNS_RL}  # presets that are the default run at another RL dose
ARM_LABELS = {
    "sft": "SFT (continued, diverse demos)",
    "grpo": "GRPO",
    "grpo_kl": "GRPO + KL to SFT start",
    "grpo_klcov": "GRPO + KL-Cov",
    "grpo_clipcov": "GRPO + Clip-Cov",
    "grpo_ent": "GRPO + entropy bonus",
    "grpo_darling": "GRPO + DARLING (reward x distinctness)",
    "grpo_sft_refresh": "GRPO + periodic SFT refresh",
    "grpo_count": "GRPO + count bonus (rare templates)",
    "grpo_critique": "GRPO + critique (Critique-GRPO refinements)",
    "rloo": "RLOO",
    "ppo": "PPO-clip",
    # the controls that make a squeeze RL's (issue 31 §2; controls.py)
    "sft_kl": "SFT (continued, run up to the RL KL to the start)",
    "rs_sft": "Rejection-sampling SFT (own successes)",
    "grpo_shuffled": "GRPO, shuffled rewards",
    "grpo_positive": "GRPO, positive control (pays one template)",
}
SFT_ARMS = ("sft", "sft_kl", "rs_sft")  # arms that are not trained by train_rl


@dataclass
class SqueezeConfig:
    out: str = "runs/squeeze"             # output directory
    quick: bool = False                   # the demo preset (about 2.5 minutes on 2 idle cores)
    seeds: int = 6                        # seeds per arm
    arms: tuple[str, ...] = ("sft", "grpo", "grpo_kl", "grpo_klcov", "grpo_clipcov", "grpo_ent", "grpo_critique")
    model: str | None = None              # HF model name/path; None = train a tiny LM on the world
    device: str = "cpu"                   # cpu | cuda
    jobs: int | None = None               # arm-seed runs in parallel worker processes (None: 2 when the tiny LM
    #                                       runs on a CPU with >= 2 cores, else 1)
    threads: int | None = None            # torch intra-op threads of the sequential stages (None: for the tiny LM
    #                                       on CPU as many as arm jobs, each arm worker has 1; else torch's)
    world_seed: int = 0                   # seed of the procedural world
    world_version: int = 3                # its generator version: 3 adds former names (shift_renamed, shift_homonym,
    #                                       where decompose and hops each lose >= 0.5 EM to the other); 2 = the world
    #                                       of the runs before issue 21 (byte-identical)
    env_preset: str = "squeeze2"          # env preset of the heuristic strategy stage and summary world.em:
    #                                       squeeze2 = this config's top_k / max_turns / passage_chars
    n_entities: int = 4000                # world size: 4,800 train questions (with 480 the LM memorised the train
    #                                       answers: train 0.47 vs test 0.11 success; with 2,400 train = test)
    max_turns: int = 3                    # searches per episode
    top_k: int = 2                        # passages per search
    passage_chars: int = 200              # observation budget per passage (characters; 90 cut most answers off)
    demo_passes: int = 4                  # diverse-agent passes over the train questions (different strategies)
    demo_success_only: bool = True        # SFT on successful demonstrations only (rejection sampling)
    arm_demo_passes: int | None = None    # diverse-agent passes behind the continued-SFT arm's and the SFT
    #                                       refresh's fresh demonstrations (None: demo_passes)
    arm_demo_questions: int | None = None  # ... over this many train questions (a fixed random subset; None: all)
    tiny: TinyLMConfig = field(default_factory=lambda: TinyLMConfig(vocab_size=2048, hidden_size=128,
                                                                    num_layers=3, num_heads=4,
                                                                    intermediate_size=384))
    pretrain: PretrainArgs = field(default_factory=lambda: PretrainArgs(max_steps=800))  # the tiny LM only
    sft: SFTArgs = field(default_factory=lambda: SFTArgs(learning_rate=3e-3, max_steps=1500, batch_size=16,
                                                         micro_batch_size=8, warmup_steps=20,
                                                         final_lr_ratio=0.1, context_loss_weight=0.5))
    # the dose (docs/squeeze.md "The RL dose"): lr 5e-4 x 20 steps moves the LM (per-token KL to the start >= 0.1
    # from step 11 on, 0.17 at step 20); at 2e-4 it barely moved (KL 0.022), at 1e-3 it diverged (KL 2.9)
    rl: RLArgs = field(default_factory=lambda: RLArgs(total_steps=20, prompts_per_step=8, group_size=8,
                                                      learning_rate=5e-4, max_new_tokens=20,
                                                      micro_batch_size=32, checkpoint_every=10,
                                                      max_context=1024))
    minibatches: int = 4                  # optimizer steps (mini-batches) per rollout batch in every RL arm: with 1,
    #                                       the ratio pi/pi_old is exactly 1 and Clip-Cov/KL-Cov/PPO-clip never act
    sft_arm_steps_per_step: int | None = None  # continued-SFT optimizer steps per tracked step (None: the RL
    #                                       arms' optimizer steps per rollout batch, so compute is matched)
    kl_target: float = 0.3                # sft_kl: stop once the KL to the SFT start reaches this (GRPO's at the
    #                                       shipped dose: 0.27-0.36 at step 20 on worlds 0, 1, 5)
    sft_kl_max_factor: int = 2            # ... or after this many times the RL arms' steps (its KL plateaus
    #                                       by step ~10 at lr 1e-3: 0.09-0.17 over steps 10-60 on world 0)
    sft_kl_learning_rate: float | None = 1e-3  # sft_kl's rate (None: the RL arms'). Probe on world 0 (docs/
    #                                       squeeze.md): at 5e-4 the KL stays at 0.02-0.06; at 1e-3 it plateaus at
    #                                       0.09-0.17 with rollout reward kept; at 2e-3 it reaches 0.30 by step 4
    #                                       while rollout reward halves (0.375 -> 0.19): matched by damage
    kl_coef: float = 0.05                 # grpo_kl: coefficient of KL(pi || SFT start) (low-variance k3)
    count_coef: float = 0.5               # grpo_count: bonus scale c in r + c*min(1, 1/sqrt(N(question, templates)))
    refresh_every: int = 5                # grpo_sft_refresh: SFT steps on demonstrations every N RL steps
    refresh_steps: int = 2                # ... this many (warm start's lr, loss mix and batch size)
    kl_cov_ratio: float = 2e-3            # KL-Cov k (released 7B script: k_percent 0.2 = 2e-3)
    clip_cov_ratio: float = 2e-4          # Clip-Cov r (released default)
    ent_coef: float = 0.01                # entropy-bonus arm coefficient
    eval_questions: int = 128             # train-split questions evaluated per model (RL trains on the whole split)
    eval_shift_questions: int = 128       # questions per held-out split (test and each shift split); the gate
    #                                       reads its Wilson lower bound on these, so >= 128 keeps it informative
    eval_samples: int = 2                 # samples per question (pass@k up to this k; larger k: passk_max); 2, not
    #                                       4, keeps the default run within 90 minutes on 2 cores (evaluation was
    #                                       two thirds of an arm-seed's time); the CIs are over seeds and questions
    eval_temperature: float = 1.0         # sampling temperature for evaluation
    competence_gate: float = 0.3          # the SFT start's success on unseen test questions below which the LM
    #                                       findings are marked unusable (the run still finishes)
    gate_questions: int = 256             # test questions of the gate (gate_samples each; its Wilson lower bound
    #                                       is over questions: 0.375 on 128 has 0.296, on 256 0.317)
    gate_samples: int = 4                 # samples per gate question (the shipped start's manifest has 4)
    start_from: str | None = None         # None or "train": train the SFT start; "shipped": the package's start
    #                                       when its key matches this config (start.py), else train one (with a
    #                                       warning); a path: that model. The presets use "shipped" for the tiny
    #                                       LM: it is the start their own pipeline builds, bit for bit (make
    #                                       sft-start), so a run does not spend 21 minutes rebuilding it
    preset_name: str = "default"          # quick | default | long (PRESETS)
    gate_questions_from_manifest: bool = True  # the shipped start's gate figures from its manifest when they were
    #                                       measured the same way (questions, samples, temperature), not re-run
    only_start: bool = False              # stop after the SFT start and its gate (--only-start)
    ship_start: bool = False              # ... and copy it into the package data (--ship-start; start.py)
    resume: bool = False                  # skip finished stages, continue interrupted arms
    stop_on_failed_gate: bool = False     # a start that fails the gate: raise CompetenceGateError before the
    #                                       arms (--stop-on-failed-gate; for runs over several worlds)
    strategy_seeds: int = 20              # strategy-policy stage (run first; strategy_policy.py): seeds per arm,
    #                                       0 disables it
    strategy_arms: tuple[str, ...] = ("sft", "grpo", "grpo_kl", "grpo_ent", "grpo_clipcov", "grpo_klcov",
                                      "grpo_count", "grpo_darling", "grpo_sft_refresh")
    strategy_steps: int = 60              # its RL steps per arm
    contextual_seeds: int = 20            # the organism on the mixed train split (organism.py): seeds per arm,
    #                                       0 disables it (the summary's organism.contextual)
    contextual_steps: int = 60            # its RL steps per arm
    contextual_arms: tuple[str, ...] | None = None  # its arms (None: all of organism.DEFAULT_ARMS)
    passk_max: int = 64                   # pass@k up to this k (SFT start vs each arm; 0 disables it) ...
    passk_questions: int = 16             # ... on this many questions of each of passk_splits ...
    passk_splits: tuple[str, ...] = ("test", "shift_strategy")
    passk_seeds: int = 1                  # ... for the first this-many seeds of each arm (all seeds: 0)

    @classmethod
    def preset(cls, quick: bool = False, *, name: str | None = None, **overrides: Any) -> SqueezeConfig:
        """``name`` (or ``quick=True``, an alias of ``name="quick"``): one of :data:`PRESETS`.

        quick: the demo (about 2.5 minutes on 2 idle cores); it starts from the shipped SFT start (the default pipeline's, package data)
        and runs short RL arms from it. long: the default run at the RL dose of docs/squeeze.md "The RL dose".
        learns: the default run at lr 2e-4 x 100 steps, the dose at which GRPO raises train success over continued
        SFT (docs/squeeze.md "A dose that learns")."""
        name = "quick" if quick else (name or "default")
        if name not in PRESETS:
            raise ConfigError(f"unknown preset {name!r}; choose from {', '.join(PRESETS)}")
        if name == "quick":
            # the default world and model recipe (so the shipped start fits); the strategy policy and the organism
            # with 6 seeds (enough for an interval), and an LM block that is a pipeline check: two 1-seed arms of 4
            # steps, one per arm worker, on small evaluation pools (docs/squeeze.md "Timings of the quick runs")
            base = cls(quick=True, seeds=1, arms=("sft", "grpo"), start_from="shipped", arm_demo_passes=1,
                       arm_demo_questions=800,
                       rl=RLArgs(total_steps=4, prompts_per_step=4, group_size=8, learning_rate=5e-4,
                                 max_new_tokens=20, micro_batch_size=32, checkpoint_every=10, max_context=1024),
                       eval_questions=16, eval_shift_questions=8, eval_samples=2, strategy_seeds=10, strategy_steps=30,
                       contextual_seeds=10, contextual_steps=30,
                       contextual_arms=("sft", "rs_sft", "grpo", "grpo_critique", "grpo_majority"), passk_max=16,
                       passk_questions=2, passk_splits=("test",),
                       # sft_kl as a pipeline check: at 6 quick steps GRPO's KL reached ~0.18 and continued SFT's only
                       # ~0.11 after 18, so 3x the steps buy no match, only ~90 s of `--arms all`
                       sft_kl_max_factor=1)
        elif name in _PRESET_RL:
            base = cls(rl=replace(cls().rl, **_PRESET_RL[name]), start_from="shipped")
        else:
            base = cls(start_from="shipped")
        base.preset_name = name
        if overrides.get("start_from") is None and (overrides.get("model") is not None
                                                     or overrides.get("only_start")):
            # a real LM gets its own SFT start (the shipped one is the tiny LM's), and --only-start builds one
            base.start_from = "train"
        for k, v in overrides.items():
            if v is None:
                continue
            if not hasattr(base, k):
                raise ConfigError(f"unknown squeeze option {k!r}")
            setattr(base, k, v)
        return base

    def validate(self) -> None:
        self._validate_arms()
        self._validate_strategy()
        if self.passk_max < 0 or self.passk_questions < 1 or self.passk_seeds < 0:
            raise ConfigError(f"--passk-max must be >= 0, passk_questions >= 1 and passk_seeds >= 0, got "
                              f"{self.passk_max}, {self.passk_questions}, {self.passk_seeds}")
        self.rl.validate()
        self.sft.validate()
        self.pretrain.validate()
        for arm in self.arms:
            if arm not in SFT_ARMS:
                self.arm_args(arm, 1).validate()

    def _validate_arms(self) -> None:
        bad = [a for a in self.arms if a not in ARM_LABELS]
        if bad:
            raise ConfigError(f"unknown arm(s) {bad}; choose from {sorted(ARM_LABELS)}")
        from searchgym.data.world.world import VERSIONS

        if self.world_version not in VERSIONS:
            raise ConfigError(f"world_version must be one of {list(VERSIONS)}, got {self.world_version}")
        from searchgym.envs.presets import get_preset

        get_preset(self.env_preset)  # an unknown preset fails here, not after the LM stages
        if self.jobs is not None and self.jobs < 1:
            raise ConfigError(f"--jobs must be >= 1, got {self.jobs}")
        if self.arm_demo_questions is not None and self.arm_demo_questions < 1:
            raise ConfigError(f"arm_demo_questions must be >= 1 or None, got {self.arm_demo_questions}")
        if self.seeds < 1:
            raise ConfigError("seeds must be >= 1")
        if self.eval_samples < 1 or self.gate_samples < 1:
            raise ConfigError(f"eval_samples and gate_samples must be >= 1, got {self.eval_samples}, "
                              f"{self.gate_samples}")
        if self.minibatches < 1:
            raise ConfigError(f"--minibatches must be >= 1, got {self.minibatches}")
        n = self.rl.prompts_per_step * self.rl.group_size
        if n % self.minibatches:
            raise ConfigError(f"--minibatches {self.minibatches} does not divide the {n} episodes of a rollout "
                              f"batch ({self.rl.prompts_per_step} questions x {self.rl.group_size} samples)")
        if self.sft_arm_steps_per_step is not None and self.sft_arm_steps_per_step < 1:
            raise ConfigError(f"sft_arm_steps_per_step must be >= 1, got {self.sft_arm_steps_per_step}")
        if self.count_coef <= 0 and "grpo_count" in self.arms:
            raise ConfigError(f"the grpo_count arm needs count_coef > 0, got {self.count_coef}")
        if self.refresh_every < 1 or self.refresh_steps < 1:
            raise ConfigError(f"refresh_every and refresh_steps must be >= 1, got {self.refresh_every}, "
                              f"{self.refresh_steps}")
        if self.kl_coef <= 0 and "grpo_kl" in self.arms:
            raise ConfigError(f"the grpo_kl arm needs kl_coef > 0, got {self.kl_coef}")
        if self.sft_kl_learning_rate is not None and self.sft_kl_learning_rate <= 0:
            raise ConfigError(f"sft_kl_learning_rate must be > 0, got {self.sft_kl_learning_rate}")
        if self.kl_target <= 0 or self.sft_kl_max_factor < 1:
            raise ConfigError(f"kl_target must be > 0 and sft_kl_max_factor >= 1, got {self.kl_target}, "
                              f"{self.sft_kl_max_factor}")

    def _validate_strategy(self) -> None:
        if self.strategy_seeds < 0:
            raise ConfigError(f"--strategy-seeds must be >= 0 (0 disables the stage), got {self.strategy_seeds}")
        if self.strategy_seeds:
            from searchgym.experiments.squeeze.strategy_policy import ARMS as STRATEGY_ARMS

            bad = [a for a in self.strategy_arms if a not in STRATEGY_ARMS]
            if bad or not self.strategy_arms:
                raise ConfigError(f"--strategy-arms: unknown or no arm(s) {bad}; choose from {list(STRATEGY_ARMS)}")
            if self.contextual_seeds < 0 or self.contextual_steps < 1:
                raise ConfigError("contextual_seeds must be >= 0 and contextual_steps >= 1, got "
                                  f"{self.contextual_seeds}, {self.contextual_steps}")
            from searchgym.experiments.squeeze.strategy_policy import ALL_ARMS

            bad = [a for a in (self.contextual_arms or ()) if a not in ALL_ARMS]
            if bad:
                raise ConfigError(f"contextual_arms: unknown arm(s) {bad}; choose from {list(ALL_ARMS)}")
            if self.strategy_steps < 1:
                raise ConfigError(f"--strategy-steps must be >= 1, got {self.strategy_steps}")

    def trains_start(self) -> bool:
        """Whether the SFT start is built by this run (not the shipped one, not a given path)."""
        return self.start_from in (None, "train")

    def arm_jobs(self) -> int:
        """Worker processes for the arms stage (each runs one arm-seed with one torch thread), and for the seeds
        of the strategy-policy and organism stages."""
        import os

        if self.jobs is not None:
            return int(self.jobs)
        if self.model is None and self.device == "cpu":
            return max(1, min(2, os.cpu_count() or 1))
        return 1

    def sft_steps_per_step(self) -> int:
        """Continued-SFT optimizer steps per tracked step: by default as many as an RL arm takes per rollout
        batch (compute matched)."""
        if self.sft_arm_steps_per_step:
            return int(self.sft_arm_steps_per_step)
        return self.rl.update_epochs * self.minibatches

    def arm_args(self, arm: str, seed: int) -> RLArgs:
        # every RL arm takes the same optimizer steps on the same filtered groups; arms differ in their control
        base = replace(self.rl, seed=seed, device=self.device, num_minibatches=self.minibatches,
                       log_kl_to_start=True)  # the dose of every arm: KL of its rollouts to the SFT start
        if arm == "grpo":
            return base
        if arm == "grpo_kl":
            return replace(base, kl_coef=self.kl_coef, kl_estimator="low_var_kl")
        if arm == "grpo_klcov":
            return replace(base, policy_loss="kl_cov", kl_cov_ratio=self.kl_cov_ratio, kl_cov_coef=1.0)
        if arm == "grpo_clipcov":  # released scripts: PPO clip ranges 1 (ratio clamped to [0, 2])
            return replace(base, policy_loss="clip_cov", clip_cov_ratio=self.clip_cov_ratio, clip_low=1.0,
                           clip_high=1.0)
        if arm == "grpo_count":  # GRPO's update; the bonus is added in stages.run_rl_arm
            return base
        if arm == "grpo_sft_refresh":  # GRPO's update; SFT steps added in stages.run_rl_arm
            return base
        if arm in ("grpo_critique", "grpo_shuffled", "grpo_positive"):  # GRPO's update; refinements after the
            return base  # env's critique / shuffled rewards / the one-template reward in stages.run_rl_arm
        if arm == "grpo_darling":  # reward shaped in stages.run_rl_arm; DARLING's GRPO has no std
            return replace(base, norm_adv_by_std=False)  # normalisation (literature.md §5.1)
        if arm == "grpo_ent":
            return replace(base, ent_coef=self.ent_coef)
        if arm == "rloo":
            return replace(base, algo="rloo")
        if arm == "ppo":
            return replace(base, algo="ppo", group_size=1,
                           prompts_per_step=base.prompts_per_step * base.group_size, update_epochs=2,
                           num_minibatches=2)
        raise ConfigError(f"arm {arm!r} is not an RL arm")

