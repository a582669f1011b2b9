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
    CHARACTERS_DIR=/app/characters

WORKDIR /app

# The code first and the characters last, so that editing a character rebuilds one layer only.
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY cards ./cards
COPY memory ./memory
COPY migrations ./migrations
RUN pip install .
COPY characters ./characters

# A user without a login or a home of its own; it owns only the data volume.
RUN useradd --system --uid 10001 --no-create-home --home-dir /nonexistent companion \
    && mkdir /data \
    && chown companion:companion /data
USER companion
VOLUME ["/data"]

ENTRYPOINT ["companion"]
CMD ["run"]
