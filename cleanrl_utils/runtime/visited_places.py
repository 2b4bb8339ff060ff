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

    def rooms_of(self, envs: np.ndarray) -> list[int]:
        """How many rooms the current games of `envs` reached (call before `end_games`, which forgets them)."""
        return [len({room for room, _, _ in self.game_places[env]}) for env in envs]

    def state_dict(self) -> dict[str, list]:
        """The run's rooms and places as plain data, for a checkpoint (the games under way are not kept)."""
        return {"rooms": sorted(self.rooms), "places": [list(place) for place in sorted(self.places)]}

    def load_state_dict(self, state: dict[str, list]) -> None:
        """Take a `state_dict()`; the games of a resumed run start anew, with nothing reached. ValueError (nothing
        changed) for anything else than whole numbers in [0, 255], places as (room, x cell, y cell)."""
        if not isinstance(state, dict) or set(state) != {"rooms", "places"}:
            raise ValueError("it is not the rooms and places a run reached")
        rooms, places = state["rooms"], state["places"]
        byte = lambda n: type(n) is int and 0 <= n < 256  # noqa: E731 (RAM bytes and the cells they give)
        if not (isinstance(rooms, list) and isinstance(places, list) and all(byte(room) for room in rooms)):
            raise ValueError("its rooms are not RAM bytes")
        if not all(isinstance(p, list | tuple) and len(p) == 3 and all(byte(n) for n in p) for p in places):
            raise ValueError("its places are not (room, x cell, y cell)")
        self.rooms, self.places = set(rooms), {tuple(place) for place in places}
        self.game_places = [set() for _ in self.game_places]
