"""What every stage stands on: files the harness writes, text safe to show, bounded output views, masking, stop signals."""
