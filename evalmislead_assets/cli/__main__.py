import sys

from evalmislead_assets.cli import main

sys.exit(main())
