# syntax=docker/dockerfile:1
# Switchboard image: one program, `switchboard` (dist/cli.js); the compose file runs it as `serve` and `worker`.

# ---- build: all dependencies, compile, then drop the dev dependencies ----------------------------------------
FROM node:24-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY scripts/copy-assets.mjs ./scripts/
# `npm run build` compiles and copies the SQL migrations next to the compiled migrator. No `npm cache clean`:
# this stage is discarded, the runtime stage copies only node_modules, dist and package*.json from it.
RUN npm run build \
 && npm prune --omit=dev --no-audit --no-fund

# ---- runtime ---------------------------------------------------------------------------------------------------
FROM node:24-slim AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    DATA_DIR=/app/.switchboard
WORKDIR /app
COPY --from=build --chown=node:node /app/package.json /app/package-lock.json ./
COPY --from=build --chown=node:node /app/node_modules ./node_modules
COPY --from=build --chown=node:node /app/dist ./dist
RUN mkdir -p /app/.switchboard && chown node:node /app/.switchboard
USER node
EXPOSE 8080
# For `serve`; the compose file gives `worker` its own check on WORKER_OPS_PORT (9464).
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=6 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
ENTRYPOINT ["node", "dist/cli.js"]
CMD ["serve"]
