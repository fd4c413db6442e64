from jkofast.cli import main

raise SystemExit(main())
