"""Synthetic data for streamwarden experiments: the military drill of Carminati et al. (2010).

Example:
    >>> from streamwarden.datagen import drill_frames
    >>> sorted(drill_frames(soldiers=2, minutes=0.5, health="norm"))
    ['Position', 'normHealth']
"""

from .drill import (
    DEFAULT_START,
    EXTENT,
    HEALTH_SCHEMA,
    POSITION_SCHEMA,
    TARGET,
    DrillSummary,
    drill_frames,
    generate_drill,
    platoon_names,
)
from .roadnet import RoadNetwork, Tracks, build_road_network, simulate_tracks

__all__ = [
    "DEFAULT_START",
    "EXTENT",
    "HEALTH_SCHEMA",
    "POSITION_SCHEMA",
    "TARGET",
    "DrillSummary",
    "RoadNetwork",
    "Tracks",
    "build_road_network",
    "drill_frames",
    "generate_drill",
    "platoon_names",
    "simulate_tracks",
]
