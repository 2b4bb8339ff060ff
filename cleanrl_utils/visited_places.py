"""How much of an Atari game an agent has explored, read from the console's RAM.

Exploration methods such as RND are judged by where they take the agent, not only by points: in
Montezuma's Revenge the RND paper counts the rooms found. envpool returns each env's 128 bytes of RAM
in `info["ram"]`; for the games listed here we know which bytes hold the room and the player's position.
"""

import numpy as np

# RAM addresses of (room, player x, player y), by game name (the env id without version or suffix)
POSITION_ADDRESSES = {"MontezumaRevenge": (3, 42, 43)}
CELL_PIXELS = 8  # positions are counted in 8x8-pixel cells, so one step to the side is not a new place


def game_name(env_id: str) -> str:
    """`MontezumaRevenge-v5` and `MontezumaRevengeNoFrameskip-v4` are both `MontezumaRevenge`."""
    return env_id.split("-")[0].removesuffix("NoFrameskip")


class VisitedPlaces:
    """The rooms and (room, cell) places seen over a whole run and in each env's current game, for games whose
    RAM layout is known (for the others nothing is counted)."""

    def __init__(self, env_id: str, num_envs: int) -> None:
        self.addresses = POSITION_ADDRESSES.get(game_name(env_id))
        self.rooms: set[int] = set()
        self.places: set[tuple[int, int, int]] = set()
        self.game_places: list[set[tuple[int, int, int]]] = [set() for _ in range(num_envs)]

    @property
    def known(self) -> bool:
        """Whether this game's RAM layout is known."""
        return self.addresses is not None

    def update(self, ram: np.ndarray) -> None:
        """Add the place of each env, from a (num_envs, 128) array of RAM bytes."""
        if self.addresses is None:
            return
        rooms, xs, ys = np.asarray(ram)[:, self.addresses].astype(int).T
        self.rooms.update(rooms.tolist())
        for env, place in enumerate(zip(rooms.tolist(), (xs // CELL_PIXELS).tolist(), (ys // CELL_PIXELS).tolist())):
            self.places.add(place)
            self.game_places[env].add(place)

    def end_games(self, envs: np.ndarray) -> list[int]:
        """How many places the games of `envs` reached; their next games count from nothing."""
        counts = [len(self.game_places[env]) for env in envs]
        for env in envs:
            self.game_places[env] = set()
        return counts
