from htatui.cli import main

raise SystemExit(main())
