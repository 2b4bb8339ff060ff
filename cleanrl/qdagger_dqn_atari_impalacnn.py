"""QDagger (reincarnating RL): an IMPALA-CNN DQN student that starts from a trained DQN teacher, on Atari games.

Docs: https://cleanrl-next.readthedocs.io/rl-algorithms/qdagger/#qdagger_dqn_atari_impalacnnpy (docs/rl-algorithms/qdagger.md)
"""

import os
import random
from collections import deque
from dataclasses import dataclass
from typing import Annotated

import tyro

from cleanrl_utils.runtime.command_line import check_command_line, replay_memory_problem


@dataclass
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    """experiment name, part of the run name (defaults to the file's name)"""
    seed: int = 1
    """random seed for Python, NumPy, the framework and the environments"""
    torch_deterministic: bool = True
    """make cuDNN pick deterministic kernels (`torch.backends.cudnn.deterministic`)"""
    cuda: bool = True
    """use a CUDA GPU when one is available"""
    track: bool = False
    """log the run to Weights & Biases as well as TensorBoard"""
    wandb_project_name: str = "cleanRL"
    """Weights & Biases project the run is logged to"""
    wandb_entity: str | None = None
    """Weights & Biases user or team owning the project (default: your own)"""
    capture_video: bool = False
    """record episodes of the first environment as mp4 files under `videos/`"""
    save_model: bool = False
    """save the model into the `runs/{run_name}` folder, then evaluate it"""
    upload_model: bool = False
    """upload the saved model, its evaluation and logs to the Hugging Face Hub"""
    hf_entity: str = ""
    """Hugging Face Hub account or organisation that owns the uploaded model's repo (empty: the token's own)"""
    checkpoint_frequency: int = 0
    """save a checkpoint to resume from every this many offline and online steps (0: never); it holds both replay memories"""
    resume: str | None = None
    """continue the run of this checkpoint file, or of this run folder's newest one, with its arguments (checked as the command line's); a checkpoint is read as data, never run"""

    # the algorithm's settings; defaults are the published hyperparameters
    env_id: str = "BreakoutNoFrameskip-v4"
    """Gymnasium id of the environment to train on"""
    total_timesteps: int = 10000000
    """training budget of the online phase, in environment steps"""
    learning_rate: float = 1e-4
    """optimiser step size"""
    num_envs: int = 1
    """environments stepped in parallel (this script runs exactly one, without a vector-env wrapper)"""
    buffer_size: int = 1000000
    """replay memory capacity in transitions (the student's, and the teacher's)"""
    gamma: float = 0.99
    """discount factor γ"""
    tau: float = 1.0
    """soft-update rate τ of the target network (1.0 copies the weights)"""
    target_network_frequency: int = 1000
    """environment steps between target-network updates"""
    batch_size: int = 32
    """transitions per replay sample"""
    start_e: float = 1.0
    """ε of ε-greedy exploration at the start"""
    end_e: float = 0.01
    """ε of ε-greedy exploration once annealed"""
    exploration_fraction: float = 0.10
    """share of the budget over which ε falls linearly from start-e to end-e"""
    learning_starts: int = 80000
    """environment steps collected before the first update"""
    train_frequency: int = 4
    """environment steps between gradient updates"""

    # the teacher and the offline phase
    teacher_model_path: Annotated[str | None, tyro.conf.arg(aliases=("--teacher-policy-hf-repo",))] = None
    """the teacher: a local .cleanrl_model file of dqn_atari.py, or a Hugging Face Hub repo id holding one (None: cleanrl/{env-id}-{teacher-model-exp-name}-seed1)"""
    teacher_model_exp_name: str = "dqn_atari"
    """the exp name of the teacher's model file in its Hub repo ({teacher-model-exp-name}.cleanrl_model)"""
    teacher_eval_episodes: int = 10
    """the number of games the teacher (and the offline student) is scored on"""
    teacher_steps: int = 500000
    """the environment steps the teacher plays to fill its replay memory"""
    offline_steps: int = 500000
    """the gradient steps of the offline phase (the student learns from the teacher's replay memory only)"""
    offline_eval_frequency: int = 100000
    """score (and save) the student every this many offline steps (0: never)"""
    temperature: float = 1.0
    """the temperature of the softmax that turns Q-values into the policies of the distillation loss"""


check_command_line(Args, __name__)  # bad input ends here in one line, before the slow imports below
import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from stable_baselines3.common.atari_wrappers import ClipRewardEnv, EpisodicLifeEnv, FireResetEnv, MaxAndSkipEnv, NoopResetEnv

from cleanrl_utils.runtime.evals.atari import evaluate_dqn
from cleanrl_utils.runtime.experiment import Experiment, check_atari_game
from cleanrl_utils.runtime.frame_replay import FrameReplayBuffer
from cleanrl_utils.runtime.huggingface import DownloadError, download
from cleanrl_utils.runtime.model_files import ModelFileError, read_torch

try:  # no ALE banner: an error about the teacher stays one line
    import ale_py

    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
except ImportError:
    pass


def make_env(env_id, idx, capture_video, run_name):
    def thunk():
        check_atari_game(env_id)
        import cv2  # here, not at the top: without the atari extra, making the env fails in one line

        # frame skip by MaxAndSkipEnv (max over the last two frames), not by the ALE
        skip = {"frameskip": 1} if gym.spec(env_id).kwargs.get("frameskip", 1) != 1 else {}
        if capture_video and idx == 0:
            env = gym.make(env_id, render_mode="rgb_array", disable_env_checker=True, **skip)
            env = gym.wrappers.RecordVideo(env, f"videos/{run_name}")
        else:
            env = gym.make(env_id, disable_env_checker=True, **skip)
        # below the life and reward wrappers: `info["episode"]` holds a whole game's raw score
        env = gym.wrappers.RecordEpisodeStatistics(env)
        env = NoopResetEnv(env, noop_max=30)
        env = MaxAndSkipEnv(env, skip=4)
        env = EpisodicLifeEnv(env)  # a lost life ends the episode for learning, not the game
        if "FIRE" in env.unwrapped.get_action_meanings():
            env = FireResetEnv(env)
        env = ClipRewardEnv(env)
        env = gym.wrappers.ResizeObservation(env, (84, 84))  # the max of the last two RGB frames, rescaled
        gray = gym.spaces.Box(0, 255, (84, 84), "uint8")  # then the luminance of the rescaled frame: the teacher's frames
        env = gym.wrappers.TransformObservation(env, lambda rgb: cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY), gray)
        env = gym.wrappers.FrameStackObservation(env, 4)
        return env

    return thunk


class TeacherModel(nn.Module):
    """The Q-network of dqn_atari.py (Nature-CNN), same layer names, so its saved state_dict loads here."""

    def __init__(self, env):
        super().__init__()
        self.network = nn.Sequential(
            nn.Conv2d(4, 32, 8, stride=4),
            nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2),
            nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(3136, 512),
            nn.ReLU(),
            nn.Linear(512, env.action_space.n),
        )

    def forward(self, x):
        return self.network(x / 255.0)


class ResidualBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv0 = nn.Conv2d(in_channels=channels, out_channels=channels, kernel_size=3, padding=1)
        self.conv1 = nn.Conv2d(in_channels=channels, out_channels=channels, kernel_size=3, padding=1)

    def forward(self, x):
        inputs = x
        x = self.conv0(F.relu(x))
        x = self.conv1(F.relu(x))
        return x + inputs


class ConvSequence(nn.Module):
    """conv 3x3 -> max-pool 3x3 stride 2 (halves the size) -> two residual blocks."""

    def __init__(self, input_shape, out_channels):
        super().__init__()
        self._input_shape = input_shape
        self._out_channels = out_channels
        self.conv = nn.Conv2d(in_channels=self._input_shape[0], out_channels=self._out_channels, kernel_size=3, padding=1)
        self.res_block0 = ResidualBlock(self._out_channels)
        self.res_block1 = ResidualBlock(self._out_channels)

    def forward(self, x):
        x = self.conv(x)
        x = F.max_pool2d(x, kernel_size=3, stride=2, padding=1)
        x = self.res_block0(x)
        return self.res_block1(x)

    def get_output_shape(self):
        _c, h, w = self._input_shape
        return (self._out_channels, (h + 1) // 2, (w + 1) // 2)


class QNetwork(nn.Module):
    """The student: IMPALA-CNN (channels 16, 32, 32) -> 256 -> one Q-value per action."""

    def __init__(self, env):
        super().__init__()
        shape = env.observation_space.shape  # (4, 84, 84)
        conv_seqs = []
        for out_channels in [16, 32, 32]:
            conv_seq = ConvSequence(shape, out_channels)
            shape = conv_seq.get_output_shape()
            conv_seqs.append(conv_seq)
        conv_seqs += [
            nn.Flatten(),
            nn.ReLU(),
            nn.Linear(in_features=shape[0] * shape[1] * shape[2], out_features=256),
            nn.ReLU(),
            nn.Linear(in_features=256, out_features=env.action_space.n),
        ]
        self.network = nn.Sequential(*conv_seqs)

    def forward(self, x):
        return self.network(x / 255.0)  # uint8 frames become floats in [0, 1] only here


def linear_schedule(start_e: float, end_e: float, duration: int, t: int):
    slope = (end_e - start_e) / duration
    return max(slope * t + start_e, end_e)


def kl_divergence_with_logits(target_logits, prediction_logits):
    """KL(softmax(target) || softmax(prediction)) per sample, averaged over the batch."""
    target_log_probs = F.log_softmax(target_logits, dim=-1)
    out = target_log_probs.exp() * (target_log_probs - F.log_softmax(prediction_logits, dim=-1))
    return out.sum(dim=-1).mean()


def distill_coefficient(student_returns, teacher_return):
    """1 until the student has finished 10 games; then 1 - (its mean score) / (the teacher's), 0 once it caught up."""
    if len(student_returns) < 10:
        return 1.0
    if teacher_return <= 0:  # a teacher that never scores has nothing left to teach
        return 0.0
    return max(1.0 - float(np.mean(student_returns)) / teacher_return, 0.0)


def play_games(q_network, env, games, epsilon, device):
    """The scores of `games` whole games played epsilon-greedily on `q_network` in `env`, which is then closed."""
    scores = []
    obs, _ = env.reset()
    while len(scores) < games:
        if random.random() < epsilon:
            action = env.action_space.sample()
        else:
            with torch.inference_mode():
                action = q_network(torch.as_tensor(obs, device=device).unsqueeze(0)).argmax().item()
        obs, _, terminated, truncated, info = env.step(action)
        if "episode" in info:  # the whole game, not a life
            scores.append(float(info["episode"]["r"]))
        if terminated or truncated:
            obs, _ = env.reset()
    env.close()
    return scores


TEACHER_HINTS = ("give --teacher-model-path", "check --teacher-model-exp-name")  # no such repo / no such file


def is_local_file(source):
    """A teacher source names a local file (which must exist) rather than a Hub repo id."""
    return os.path.exists(source) or source.endswith(".cleanrl_model")


def load_teacher(source, exp_name, env, device):
    """The teacher Q-network from a local model file or a Hub repo's (cached); ValueError saying why if it cannot be."""
    try:
        path = source if is_local_file(source) else download(source, f"{exp_name}.cleanrl_model", *TEACHER_HINTS)
    except DownloadError as e:
        raise ValueError(f"teacher: {e}") from None
    try:
        weights = read_torch(path, device)  # tensors only: a file of another kind is refused unread
    except Exception as e:  # what the file is instead, or unpickling errors, which have no common base
        reason = str(e) if isinstance(e, ModelFileError) else type(e).__name__
        raise ValueError(f"the teacher {path} is not a model file saved by dqn_atari.py ({reason})") from None
    teacher = TeacherModel(env).to(device, memory_format=torch.channels_last)  # oneDNN's fastest layout for convolutions
    try:
        teacher.load_state_dict(weights)
    except (RuntimeError, TypeError, AttributeError) as e:
        reason = str(e).splitlines()[0]
        raise ValueError(f"the teacher {path} does not fit {env.spec.id}: {reason} (a dqn_atari.py model of it?)") from None
    return teacher.eval()


if __name__ == "__main__":
    args, exp = Experiment.from_command_line(Args, __file__)  # on --resume, the checkpoint's arguments replace these
    exp.require_positive("batch_size")
    exp.require_positive("teacher_eval_episodes")
    exp.require(args.teacher_steps or not args.offline_steps, "--offline-steps needs --teacher-steps (the teacher's memory)")
    exp.require(args.num_envs == 1, f"--num-envs {args.num_envs}: qdagger_dqn_atari_impalacnn.py runs a single environment")
    exp.require(args.temperature > 0, f"--temperature must be positive, got {args.temperature}")
    problem = replay_memory_problem(args, 84 * 84, copies=2)  # the student's and the teacher's memories of 84x84 frames
    exp.require(not problem, problem)
    teacher_source = args.teacher_model_path or f"cleanrl/{args.env_id}-{args.teacher_model_exp_name}-seed1"
    no_file = is_local_file(teacher_source) and not os.path.isfile(teacher_source)
    exp.require(not no_file, f"--teacher-model-path: no teacher model file at {teacher_source}")
    run_name = exp.run_name

    exp.seed_global_rngs()
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    # env setup and the teacher, before any file is written
    exp.require_atari_game(see="dqn.py", see_continuous="sac_continuous_action.py")
    env = exp.make_envs(lambda: make_env(args.env_id, 0, args.capture_video, run_name)(), args.env_id)
    env.action_space.seed(args.seed)
    try:
        teacher_model = load_teacher(teacher_source, args.teacher_model_exp_name, env, device)
    except ValueError as e:
        exp.fail(str(e))
    writer = exp.start_logging()

    q_network = QNetwork(env).to(device, memory_format=torch.channels_last)
    optimizer = optim.Adam(q_network.parameters(), lr=args.learning_rate, fused=True)
    target_network = QNetwork(env).to(device, memory_format=torch.channels_last)
    target_network.load_state_dict(q_network.state_dict())

    # two frame memories: the student's and the teacher's
    frame_shape, stack = env.observation_space.shape[1:], env.observation_space.shape[0]
    rb = FrameReplayBuffer(args.buffer_size, frame_shape, stack, device)
    teacher_rb = FrameReplayBuffer(args.buffer_size, frame_shape, stack, device)

    def update_target():
        with torch.no_grad():
            for target_param, q_param in zip(target_network.parameters(), q_network.parameters()):
                target_param.lerp_(q_param, args.tau)

    learners = {"q_network": q_network, "target_network": target_network, "optimizer": optimizer}
    learners |= {"replay_buffer": rb, "teacher_replay_buffer": teacher_rb}
    student_returns = deque(maxlen=10)  # the last 10 games: the online distillation coefficient's measure
    steps_done = 0  # offline steps, then online ones: what --checkpoint-frequency counts
    if exp.loaded_checkpoint:
        exp.restore_run_state(learners)
        saved_actions = max(rb.actions.max(), teacher_rb.actions.max())
        exp.require(saved_actions < env.action_space.n, "--resume: refused, its replay memories hold actions the game lacks")
        teacher_return = exp.saved_float("teacher_return")
        student_returns = deque(exp.saved_list("student_returns", student_returns.maxlen, 0.0), maxlen=student_returns.maxlen)
        steps_done = exp.saved_int("global_step", 0, args.offline_steps + args.total_timesteps)
        exp.require(teacher_rb.size or steps_done >= args.offline_steps, "--resume: refused, its teacher's memory is empty")
        online = steps_done > args.offline_steps  # the online env has started: its observation is saved
        obs = exp.saved_array("obs", env.observation_space.shape, env.observation_space.dtype) if online else None

    def save_checkpoint(obs):
        state = {"teacher_return": teacher_return, "student_returns": student_returns, "obs": obs}
        exp.save_checkpoint(steps_done, {"global_step": steps_done, **state}, learners)

    with exp:  # catches Ctrl-C/SIGTERM (exit 130), starts the SPS clock, closes envs and logs on any exit
        if not exp.loaded_checkpoint:
            # 1. Score the teacher: the online phase measures the student against this mean.
            teacher_env = make_env(args.env_id, 1, False, run_name)()  # idx 1: no video of these games
            teacher_env.reset(seed=args.seed)
            teacher_env.action_space.seed(args.seed)
            teacher_returns = play_games(teacher_model, teacher_env, args.teacher_eval_episodes, args.end_e, device)
            teacher_return = float(np.mean(teacher_returns))
            print(f"teacher: mean score {teacher_return} over {len(teacher_returns)} games")
            writer.add_scalar("charts/teacher/avg_episodic_return", teacher_return, 0)

            # 2. Fill the teacher's replay memory by letting it play (its training memory is not available):
            # epsilon decays from start-e to end-e over these steps, as in the teacher's own training.
            teacher_env = make_env(args.env_id, 1, False, run_name)()
            teacher_env.action_space.seed(args.seed + 1)
            obs, _ = teacher_env.reset(seed=args.seed + 1)
            for step in range(args.teacher_steps):
                exp.raise_if_stopped()
                if random.random() < linear_schedule(args.start_e, args.end_e, args.teacher_steps, step):
                    action = teacher_env.action_space.sample()
                else:
                    with torch.inference_mode():
                        action = teacher_model(torch.as_tensor(obs, device=device).unsqueeze(0)).argmax().item()
                next_obs, reward, terminated, truncated, info = teacher_env.step(action)
                teacher_rb.add(obs, next_obs, action, reward, terminated, terminated or truncated)
                obs = teacher_env.reset()[0] if terminated or truncated else next_obs
            teacher_env.close()
            exp.restart_sps_clock()

        # 3. Offline phase: the student learns from the teacher's memory alone, TD loss + distillation (coefficient 1).
        for offline_step in range(steps_done, args.offline_steps):
            exp.raise_if_stopped()
            data = teacher_rb.sample(args.batch_size)
            with torch.no_grad():
                target_max, _ = target_network(data.next_observations).max(dim=1)
                td_target = data.rewards + args.gamma * target_max * (1 - data.dones)
                teacher_q_values = teacher_model(data.observations)
            student_q_values = q_network(data.observations)
            old_val = student_q_values.gather(1, data.actions.unsqueeze(1)).squeeze(1)
            q_loss = F.mse_loss(td_target, old_val)
            distill_loss = kl_divergence_with_logits(teacher_q_values / args.temperature, student_q_values / args.temperature)
            loss = q_loss + distill_loss

            if offline_step % 100 == 0:
                writer.add_scalar("charts/offline/loss", loss.item(), offline_step)
                writer.add_scalar("charts/offline/q_loss", q_loss.item(), offline_step)
                writer.add_scalar("charts/offline/distill_loss", distill_loss.item(), offline_step)
                if offline_step % 10000 == 0:
                    print(f"offline_step={offline_step}, loss={loss.item():.4f}, SPS={int(offline_step / exp.elapsed)}")

            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

            if offline_step % args.target_network_frequency == 0:
                update_target()

            if args.offline_eval_frequency and (offline_step + 1) % args.offline_eval_frequency == 0:
                exp.save_model(q_network.state_dict(), f"{args.exp_name}-offline-{offline_step + 1}")
                eval_env = make_env(args.env_id, 1, False, run_name)()
                eval_env.reset(seed=args.seed)
                eval_env.action_space.seed(args.seed)
                offline_returns = play_games(q_network, eval_env, args.teacher_eval_episodes, args.end_e, device)
                print(f"offline_step={offline_step + 1}, student's mean score {np.mean(offline_returns)}")
                writer.add_scalar("charts/offline/avg_episodic_return", np.mean(offline_returns), offline_step + 1)

            steps_done = offline_step + 1
            if exp.checkpoint_due(steps_done):
                save_checkpoint(None)  # the online env has not started yet

        # 4. Online phase: DQN on the student's own memory, distilling while it scores below the teacher;
        # its steps continue the offline count (epsilon, learning-starts and the logs' x-axis).
        first_step = steps_done - args.offline_steps
        if first_step == 0:
            obs, _ = env.reset(seed=args.seed)
            exp.restart_sps_clock()
        for step in range(first_step, args.total_timesteps):
            exp.raise_if_stopped()
            global_step = args.offline_steps + step
            epsilon = linear_schedule(args.start_e, args.end_e, args.exploration_fraction * args.total_timesteps, global_step)
            if random.random() < epsilon:
                action = env.action_space.sample()
            else:
                with torch.inference_mode():
                    action = q_network(torch.as_tensor(obs, device=device).unsqueeze(0)).argmax().item()

            next_obs, reward, terminated, truncated, info = env.step(action)

            # next_obs is the true next state even when the episode ends (we reset only below), and
            # only a termination is stored as done: a time-limit cut still bootstraps from next_obs.
            rb.add(obs, next_obs, action, reward, terminated, terminated or truncated)
            if "episode" in info:  # a whole game ended, not just a life
                episodic_return = float(info["episode"]["r"])
                print(f"global_step={global_step}, episodic_return={episodic_return}")
                writer.add_scalar("charts/episodic_return", episodic_return, global_step)
                writer.add_scalar("charts/episodic_length", int(info["episode"]["l"]), global_step)
                writer.add_scalar("charts/epsilon", epsilon, global_step)
                student_returns.append(episodic_return)
            obs = env.reset()[0] if terminated or truncated else next_obs  # after a lost life: the next one

            if global_step > args.learning_starts:
                if global_step % args.train_frequency == 0:
                    data = rb.sample(args.batch_size)
                    with torch.no_grad():
                        target_max, _ = target_network(data.next_observations).max(dim=1)
                        td_target = data.rewards + args.gamma * target_max * (1 - data.dones)
                    student_q_values = q_network(data.observations)
                    old_val = student_q_values.gather(1, data.actions.unsqueeze(1)).squeeze(1)
                    q_loss = F.mse_loss(td_target, old_val)

                    distill_coeff = distill_coefficient(student_returns, teacher_return)
                    if distill_coeff > 0:  # the teacher's forward pass only while it is needed
                        with torch.no_grad():
                            teacher_q_values = teacher_model(data.observations)
                        distill_loss = kl_divergence_with_logits(
                            teacher_q_values / args.temperature, student_q_values / args.temperature
                        )
                    else:
                        distill_loss = torch.zeros((), device=device)
                    loss = q_loss + distill_coeff * distill_loss

                    if global_step % 100 == 0:
                        writer.add_scalar("losses/loss", loss.item(), global_step)
                        writer.add_scalar("losses/td_loss", q_loss.item(), global_step)
                        writer.add_scalar("losses/distill_loss", distill_loss.item(), global_step)
                        writer.add_scalar("losses/q_values", old_val.mean().item(), global_step)
                        writer.add_scalar("charts/distill_coeff", distill_coeff, global_step)
                        sps = int(step / exp.elapsed)
                        print("SPS:", sps)
                        writer.add_scalar("charts/SPS", sps, global_step)

                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()

                if global_step % args.target_network_frequency == 0:
                    update_target()

            steps_done = global_step + 1
            if exp.checkpoint_due(steps_done):
                save_checkpoint(obs)

        if args.save_model:
            exp.save_model(q_network.state_dict())
            episodic_returns = evaluate_dqn(
                exp.model_path, make_env, args.env_id, 10, f"{run_name}-eval", QNetwork, device, args.end_e, args.capture_video
            )
            exp.log_evaluation_and_upload(episodic_returns, hub_algorithm_name="Qdagger")
