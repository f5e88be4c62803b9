"""``python -m rbtutor.course.checks``: run the instant-check service (:func:`.service.main`), as the hub does."""

from .service import main

if __name__ == "__main__":
    raise SystemExit(main())
