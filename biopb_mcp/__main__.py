from biopb_mcp.cli import main

raise SystemExit(main())
