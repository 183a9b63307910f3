from tetherbed.cli import main

raise SystemExit(main())
