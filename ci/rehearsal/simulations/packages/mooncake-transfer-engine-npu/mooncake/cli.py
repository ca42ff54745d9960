"""[simulation] The `mooncake_master` console script (`mooncake.cli:main`), as the NPU wheel ships it.

The real script runs the ELF binary the wheel carries at `mooncake/mooncake_master`,
passing its arguments through, and replaces itself with it (`os.execv`): the
running master's command line starts with that path, not with `mooncake_master`.
The program here stands in for the binary.
"""

from __future__ import annotations

import os
import stat
import sys


def main() -> int:
    program = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mooncake_master")
    if not os.access(program, os.X_OK):  # an installer may drop the mode bits, as the real script allows for
        mode = os.stat(program).st_mode
        os.chmod(program, mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    os.execv(program, [program, *sys.argv[1:]])
    return 1  # not reached: execv replaces this process or raises


if __name__ == "__main__":
    sys.exit(main())
