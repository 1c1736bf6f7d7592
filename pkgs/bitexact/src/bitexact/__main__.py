from bitexact.cli import main

raise SystemExit(main())
