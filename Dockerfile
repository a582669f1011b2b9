# The bot in a container, its SQLite database (and log file, and memory exports) on a volume:
#   docker build -t companion .
#   docker run -d --name companion --env-file .env -v companion-data:/data companion
# See "Running in Docker" in README.md.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DATABASE_PATH=/data/companion.db \
    CHARACTERS_DIR=/app/characters \
    HEALTH_HOST=127.0.0.1 \
    HEALTH_PORT=9100

WORKDIR /app

# The code first and the characters last, so that editing a character rebuilds one layer only.
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY cards ./cards
COPY memory ./memory
COPY migrations ./migrations
RUN pip install .
COPY characters ./characters

# A user without a login or a home of its own; it owns only the data volume, private to it
# (0700: the database, its log and the exports are the users' memory; a new named volume takes
# this mode, and the bot warns at every command when the folder is open to others). /app/data
# (where the relative default ./data/companion.db, and a .env copied from .env.example, put the
# database, its log and the exports) is the volume too, so whichever way .env names the data
# folder it is written in the volume, and nothing else in /app is writable.
RUN useradd --system --uid 10001 --no-create-home --home-dir /nonexistent companion \
    && mkdir /data \
    && chown companion:companion /data \
    && chmod 700 /data \
    && ln -s /data /app/data
USER companion
VOLUME ["/data"]

# `companion run` serves /healthz on HEALTH_PORT (9100 unless .env sets another).
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request as u; u.urlopen('http://127.0.0.1:' + (os.environ.get('HEALTH_PORT') or '9100') + '/healthz', timeout=3)"]

ENTRYPOINT ["companion"]
CMD ["run"]
