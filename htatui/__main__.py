from htatui.cli.main import main

raise SystemExit(main())
