"""Write a small random hub-format checkpoint (config.json + safetensors shards).

Usage: python scripts/make_random_checkpoint.py --config fixtures/tiny/config.json --out /tmp/k3-tiny
(same as `python -m pybridge make-random-checkpoint ...`)."""

import sys

from pybridge.__main__ import main

if __name__ == "__main__":
    sys.argv.insert(1, "make-random-checkpoint")
    main()
